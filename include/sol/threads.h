#pragma once
// Thread count for Sol's OpenMP regions: SOL_NUM_THREADS if set, else all cores.
namespace sol {
int num_threads();
// Overrides the default for this process (0 restores it). Used by `--threads N`.
void set_num_threads(int n);
int hardware_threads();
}  // namespace sol
