# Runs a compiled Verilog simulation (vvp) and fails the run when an assertion failed or $error/$fatal fired: vvp
# prints "ERROR: " for a failed immediate assert and a $error, and carries on to exit 0.
set -o pipefail
vvp -n "$@" | tee /tmp/.vvp-output
status=$?
if grep -q -E '^(ERROR|FATAL): ' /tmp/.vvp-output; then
  exit 1
fi
exit $status
