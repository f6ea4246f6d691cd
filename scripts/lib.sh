# Shared by the scripts that run a test suite and must fail when it ran nothing.
# Usage, from the repository root: source scripts/lib.sh

# Prints how many tests passed in the cargo test output saved in file $1 (summed over binaries).
passed_tests() {
  grep -Eo 'test result: ok\. [0-9]+ passed' "$1" | awk '{s+=$4} END {print s+0}'
}
