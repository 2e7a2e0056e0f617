"""Out-of-core distributed sort, for ranks whose sort does not fit their device memory budget.

The result is that of the in-memory sort (pipeline.py): the same order, ties broken by global input
position (so every sort is stable), each rank's shard within max(1.05·n/p, ⌈n/p⌉) elements.
No step holds more than about `budget` bytes on the device:

1. runs: each rank cuts its input into pieces that fit the budget (on GPUs at least MIN_RUNS,
   so that copies in and out overlap), sorts each on the device
   (steps/finish.local_sort, stable) and keeps the sorted run in host memory (pinned on GPUs),
   together with a regular sample of it: every t-th element, with its run and index.
2. splitters: every rank gathers all samples, orders them and picks p·q - 1 splitters: q key
   ranges ("pieces") per rank. Ties are ordered by (key, run, index in run), which is (key,
   global position): runs are contiguous pieces of the input in rank order, sorted stably.
3. cut: each run is cut by each splitter. The run's own samples say between which two sampled
   elements the cut lies; a search in the key words of the at most t rows between decides.
4. rounds: in round j every rank sends each rank d the slices of its runs in d's j-th piece.
   On GPUs the slices are copied from the pinned runs straight into a device buffer and sent
   over NCCL when every rank's share fits its budget; otherwise host buffers move: on the CPU
   backend over its transport (ranks reading each other's memory, or MPI), on GPUs, for a round
   made too big by a skewed input, over MPI (exchange_round). The receiver gets them
   in (source rank, run) order, i.e. in global position order; one stable sort on the device
   puts them in order, and they are appended to its output.

Why the sizes hold: a run has c samples below a splitter exactly when between (c-1)·t + 1 and
c·t of its elements are below it, so between two splitters whose sample ranks differ by s lie
at most t·s + m·(t-1) elements (m runs in all), below n/(p·q) + (2m + 1)·t for consecutive
splitters. The stride t is chosen so that (2m + 1)·t stays below 4% of n/p (balance, as
splitters.EPSILON) and below a quarter of a merge piece, and q so that every piece fits the
budget. Small data sets get t = 1: every element is a sample and the splitters are exact. So
would budgets so small that a merge piece holds fewer than about 16 elements per run in all;
above SAMPLE_LIMIT elements that is refused with an error naming the budget needed.

The stages, a module each: layout.py (how the work is cut), runs.py (1), cuts.py (2, 3),
merge.py (4), sources.py (what is sorted and where the shard goes), sort.py (the entry points),
files.py (files in, files out).
"""
