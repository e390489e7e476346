"""Autotuning: a tunable operation offers candidates with priorities; on the first call for a
tune key (device, op, dtype, shapes bucketed to powers of two) the best few are timed and the
winner is kept in memory and in a per-device JSON file beside the kernel cache.

`CUBE_AUTOTUNE=off|fast|full`: off takes the highest-priority valid candidate without timing;
fast (the default) times the top few; full times every valid candidate."""
from .key import bucket, tune_key
from .store import TuneStore, default_store
from .tunable import Candidate, NoCandidate, Tunable, mode

__all__ = ["Candidate", "NoCandidate", "Tunable", "TuneStore", "bucket", "default_store", "mode",
           "tune_key"]
