"""spamnb: a Naive Bayes spam filter trained on your own mail folders."""

__version__ = "0.1.0"
