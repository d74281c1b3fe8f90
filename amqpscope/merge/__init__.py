"""Several inputs as one timeline: vantage points of the same traffic and clients' logs (sans-IO).

Between the sources (captures dissected, logs read: frame records each on its own clock) and
the trackers: records in, one ordered stream of records out, each frame once, with every
input's clock offset (`clocks`), which frames two inputs share (`align`), and whether several
files are the pieces of one rotated capture or vantage points (`kind`).
"""
