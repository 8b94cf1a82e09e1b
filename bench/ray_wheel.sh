#!/usr/bin/env bash
# A Ray wheel small enough to carry to the lent GPU machine (its image has no Ray, a call carries
# at most 64 MiB, and Ray's wheel is ~78 MB). Run here, in the repo root; writes .whl/ray-*.whl
# without ray/jars (the Java workers, 34 MB) and the dashboard's web client (static files): the
# Python API, the raylet, the GCS and the dashboard's Python modules stay. `tilefit tune
# --backend ray` and bench/tune_multi_gpu.py need nothing else of it.
#
#   bash bench/ray_wheel.sh [VERSION] [PYTHON_VERSION]    # default: 2.58.0 for Python 3.12
#
# Then on the GPU machine (carry .whl): python3 -m pip install -q --no-index --no-deps
# --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
version="${1:-2.58.0}"
py="${2:-3.12}"
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$tmp" "ray==$version"
wheel="$(ls "$tmp"/ray-*.whl)"
mkdir -p .whl
python3 - "$wheel" ".whl/$(basename "$wheel")" <<'EOF'
import sys, zipfile

src, dst = sys.argv[1], sys.argv[2]
DROP = ("ray/jars/", "ray/dashboard/client/build/")
kept = dropped = 0
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if item.filename.startswith(DROP):
            dropped += item.file_size
            continue
        data = zin.read(item)
        if item.filename.endswith(".dist-info/RECORD"):  # keep RECORD true to the files
            data = b"\n".join(l for l in data.split(b"\n") if not l.decode().startswith(DROP))
        zout.writestr(item, data)
        kept += 1
print(f"{dst}: {kept} files kept, {dropped / 1e6:.0f} MB dropped")
EOF
ls -la .whl/ray-*.whl
