"""``dlbench tune``: the best settings a model gets on this machine, found by successive
halving over the settings the backends and build targets declare (``space``), measured
as bench measures (``search``), kept as bench configs and ``tune`` records (``result``),
and compared with every later bench row (``headroom``)."""
