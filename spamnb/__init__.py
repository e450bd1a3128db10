"""spamnb: a Naive Bayes spam filter trained on your own mail folders."""

__version__ = "0.1.0"

# The two labels a spam filter knows, here so that reading labelled mail needs none
# of the model's modules (a new model's training counts its mail before importing them).
SPAM = "spam"
HAM = "ham"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity on Linux), here so that the
    command line can bound --jobs without importing the parallel machinery."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
