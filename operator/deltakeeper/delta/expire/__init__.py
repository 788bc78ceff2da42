"""Data retention by age (EXPIRE): the files wholly older than a cutoff are removed from the
table in one metadata-only DELETE commit, as Delta Spark writes one, without reading or
rewriting a byte of data. `times.py` reads time values (the cutoff, partition values,
statistics, generated partition columns), `plan.py` chooses the files and says what it
refuses, `run.py` commits."""
