"""spamnb: a Naive Bayes spam filter trained on your own mail folders."""

__version__ = "0.1.0"

# The two labels a spam filter knows, here so that reading labelled mail needs none
# of the model's modules (a new model's training counts its mail before importing them).
SPAM = "spam"
HAM = "ham"
