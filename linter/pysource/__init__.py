"""Python source files, read without running them: what the call-site linter and the engine-kernel
compiles share.

* :mod:`.source` -- a file as bytes, text and AST, positions for diagnostics, ``# noqa``;
* :mod:`.scan` -- one module's ``@triton.jit`` kernels, ``@triton.autotune`` lists, launches and
  imports (:func:`~.scan.scan_source`);
* :mod:`.allowlist` -- what a kernel taken from a scanned file may read (parameters, locals,
  ``triton.language`` members, carried jit functions, literal constants) before anything
  compiles it; the check of its ``triton.language`` paths against the installed Triton;
* :mod:`.extract` -- a ``@triton.jit`` kernel and the jit helpers it calls taken out of its file by
  AST, validated, into a scratch module written by ``ast.unparse`` that imports only triton
  (:func:`~.extract.extract_kernel`).

Used by :mod:`tilefit.callsites` (launches in the user's Python files) and
:mod:`tilefit.smem.engine_kernels` (an engine's own kernel, ``--engine-kernels``). Nothing here
imports triton (only :meth:`~.extract.ScratchModule.load` does) and nothing here imports the
rest of tilefit but its data model (positions) and cache folder.
"""
