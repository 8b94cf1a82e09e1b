#!/bin/sh
# Write the shipped probe records of Triton 3.4 ... 3.8 (issue 17) from the engine-kernel cache
# that bench/release_probe.py filled: one `calibrate smem --probe-from 3.9` per (release, engine),
# NVIDIA archs, the groups whose probe differs not calibrated afresh (--no-fresh).
#   nice -n 15 sh bench/release_write.sh CACHE_DIR SCALE RISK_SHARE [RELEASE...]
set -e
cache=$1; scale=$2; risk=$3; shift 3
releases=${*:-"3.8 3.7 3.6 3.5 3.4"}
for rel in $releases; do
  case $rel in
    3.4) py=/work/venvs/t340/bin/python ;; 3.5) py=/work/venvs/t351/bin/python ;;
    3.6) py=/work/venvs/t360/bin/python ;; 3.7) py=/work/venvs/t371/bin/python ;;
    3.8) py=/work/venvs/t380/bin/python ;; *) echo "unknown release $rel" >&2; exit 2 ;;
  esac
  for wheel in /work/engines/wheels/vllm-0.33.0-*.whl /work/engines/wheels/sglang-0.5.23-*.whl; do
    kernels="--kernel fused_moe --kernel block_gemm --kernel fused_moe_wna16 --kernel mla_decode"
    case $wheel:$rel in */vllm-*:3.6) kernels="--kernel block_gemm --kernel fused_moe_wna16 --kernel mla_decode" ;; esac
    tilefit calibrate smem --engine "$wheel" $kernels --probe-from 3.9 --triton-python "$py" \
      --scale "$scale" --risk-share "$risk" --no-fresh -j 2 --cache-dir "$cache" -q \
      --arch sm_80 --arch sm_86 --arch sm_89 --arch sm_90 --arch sm_100 --arch sm_120 --arch sm_121
  done
done
