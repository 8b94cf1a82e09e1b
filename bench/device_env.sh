#!/usr/bin/env bash
# Source on the lent GPU machine (no network): makes `import tilefit` work without pip.
# Carried wheels (.whl/, see bench/README) provide jsonschema and platformdirs; the package
# layout (linter/ -> tilefit, rules/ -> tilefit.rules, device_db/ -> tilefit.device_db) is
# rebuilt with links under /tmp/tilefit_pkg.
set -e
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
rm -rf /tmp/tilefit_pkg && mkdir -p /tmp/tilefit_pkg
cp -r linter /tmp/tilefit_pkg/tilefit
ln -s "$PWD/rules" /tmp/tilefit_pkg/tilefit/rules
ln -s "$PWD/device_db" /tmp/tilefit_pkg/tilefit/device_db
export PYTHONPATH=/tmp/tilefit_pkg:$PYTHONPATH
export TILEFIT_CACHE_DIR=/tmp/tilefit_cache PYTHONUNBUFFERED=1
python3 -c "import tilefit, tilefit.rules, tilefit.device_db, torch, triton; print('tilefit ok; torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
set +e
