"""Member backends behind one seam (``base.Backend``): ``sim`` (simulated) and ``kube`` (real).

The CLI picks one; the connection only talks to the ``Backend`` protocol.
"""
