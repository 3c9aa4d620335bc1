"""``dlbench profile``: where a model's time goes, per op class and per node.

A benchmark says how fast; a profile says why.  ONNX Runtime's own profiler times
every node of the graph it actually runs (after its fusions and layout changes), in a
cell of its own like any measurement: warm-up runs excluded, then ``--iterations``
runs profiled.  The node times are summed per op class (``classes.OP_CLASSES``:
convolution, matmul, quantize/dequantize, layout reorders, ...) and set beside the
class's FLOPs counted on the source graph at the same input shapes, so a class that
takes much time for little arithmetic (a depthwise convolution, the Q/DQ around an
INT8 island) shows.  The record is stored like any other (kind ``profile``).
"""
