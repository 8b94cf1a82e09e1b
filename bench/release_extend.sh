#!/bin/sh
# Add archs to the shipped probe records of Triton 3.4 ... 3.8 (issue 17 item 2) from the engine-kernel
# cache that `bench/release_probe.py --arch ...` filled: one `calibrate smem --probe-from 3.9 --extend`
# per (release, engine); the new archs' groups that differ are not calibrated afresh (--no-fresh).
#   VENVS=/work/venvs nice -n 15 sh bench/release_extend.sh CACHE_DIR SCALE RISK_SHARE "ARCH..." [RELEASE...]
# VENVS holds one virtual environment per release, named t340 t351 t360 t371 t380 (Triton 3.4.0 3.5.1
# 3.6.0 3.7.1 3.8.0, with packaging).
set -e
cache=$1; scale=$2; risk=$3; archs=$4; shift 4
releases=${*:-"3.8 3.7 3.6 3.5 3.4"}
venvs=${VENVS:-/work/venvs}
arch_args=""
for a in $archs; do arch_args="$arch_args --arch $a"; done
for rel in $releases; do
  case $rel in
    3.4) py=$venvs/t340/bin/python ;; 3.5) py=$venvs/t351/bin/python ;; 3.6) py=$venvs/t360/bin/python ;;
    3.7) py=$venvs/t371/bin/python ;; 3.8) py=$venvs/t380/bin/python ;; *) echo "unknown release $rel" >&2; exit 2 ;;
  esac
  for wheel in /work/engines/wheels/vllm-0.33.0-*.whl /work/engines/wheels/sglang-0.5.23-*.whl; do
    # a kernel without points on these archs, or whose release file is a calibration of its own (vLLM's
    # fused MoE under 3.6), is skipped with a line saying so
    tilefit calibrate smem --engine "$wheel" --kernel fused_moe --kernel block_gemm --kernel fused_moe_wna16 \
      --kernel mla_decode --kernel scaled_mm --probe-from 3.9 --extend --triton-python "$py" \
      --scale "$scale" --risk-share "$risk" --no-fresh -j 2 --cache-dir "$cache" --package $arch_args
  done
done
