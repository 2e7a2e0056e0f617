"""The sort service: ranks that start once and run the jobs clients send them, one at a time.

`mpirun -n P python -m distsort serve --root DIR` keeps the ranks, their runtime and the
compiled kernels between jobs; rank 0 listens on a Unix socket that only its owner may use
(wire.py) and queues the jobs (server.py); `python -m distsort submit sort IN -o OUT`,
`status` and `shutdown`, or `distsort.Client` in Python, talk to it (client.py).
"""
