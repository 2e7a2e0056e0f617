"""The steps of the in-memory sample sort, one module each, in the order pipeline.py runs them:
sample -> splitters -> partition -> exchange -> finish."""
