"""The audit behind the HTML report: tables x device classes, each entry's shared memory against
each class's limit, the fixer's plans, and a summary (:mod:`tilefit.audit.model`).

:func:`build_check_audit` builds it from a ``tilefit check`` result, :func:`build_doctor_audit`
from a ``tilefit doctor`` report; :mod:`tilefit.reporters.html` renders it.
"""

from .check import build_check_audit
from .model import Audit, Cell, FixAudit, TableAudit

__all__ = ["Audit", "Cell", "FixAudit", "TableAudit", "build_check_audit"]
