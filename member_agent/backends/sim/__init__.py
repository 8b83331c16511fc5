"""The ``sim`` backend: a member cluster simulated in-process, like KWOK.

``fleet`` loads the nodes, ``scheduler`` binds replicas to them, ``backend`` runs task copies.
"""
