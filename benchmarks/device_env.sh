# Source on the lent GPU machine from the project root: numpy<2.5 (numba-cuda needs it) and
# the carried wheels into /tmp/site, data from the carried .gpu/data. Idempotent.
#   . benchmarks/device_env.sh     (carry .gpu/base or an installed RAPIDS stack, .gpu/whl, .gpu/data)
if [ ! -d /tmp/site/numpy ]; then
  bash .gpu/base/stack.sh base >/dev/null
fi
if [ -d .gpu/whl ] && [ ! -d /tmp/site/parasail ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .gpu/whl/*.whl 2>/dev/null
fi
export PYTHONPATH=$PWD:/tmp/site GPUALIGN_SHARED_DATA=$PWD/.gpu/data GPUALIGN_REAL_GPU=1 PYTHONUNBUFFERED=1
