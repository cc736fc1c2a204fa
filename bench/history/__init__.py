"""`bench history`: change points in CI's results over commits (reading the series, detecting the changes, the
smallest change a runner can see, the page), and its exit code for a CI job."""

MAX_PVALUE = 0.001  # a change point's Welch p at most this: Apache Otava's default
