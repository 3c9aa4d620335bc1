"""``dlbench profile``: where a model's time goes, per op class and per node.

A benchmark says how fast; a profile says why.  The backend's own profiler
(``profilers.PROFILERS``: ONNX Runtime's for an ONNX file, every node of the graph it
actually runs after its fusions, or OpenVINO's performance counters for one asked to run
there; PyTorch's for a PyTorch model, every op the model calls)
times the backend's own runner in a cell of its own like any measurement: warm-up runs
excluded, then ``--iterations`` runs profiled.  The node times are summed per op class
(``classes``: convolution, matmul, quantize/dequantize, layout reorders, ..., one set of
classes for ONNX op types, OpenVINO's node types and aten ops) and set beside the class's FLOPs, so a class
that takes much time for little arithmetic (a depthwise convolution, the Q/DQ around an
INT8 island) shows.  The record is stored like any other (kind ``profile``).
"""
