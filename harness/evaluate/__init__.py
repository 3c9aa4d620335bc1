"""Accuracy next to speed: ``dlbench eval`` runs a model over a data set's held-out split.

A trained checkpoint, its ONNX export and the INT8/FP16 files built from it
should all classify the same held-out images about equally well; that is the
end-to-end evidence that training, export, quantization and the backends
preserve what the network learned (the numeric verdicts of ``dlbench
verify`` compare outputs on synthetic inputs, which says nothing about
accuracy).

* ``data`` — which samples: the held-out split of a ``harness.data`` reader
  (exactly the split ``dlbench train --eval`` reports on), for any model
  shape, and the same reader's training split as INT8 calibration images;
* ``harness.evaluate.scoring`` (shared with ``train --eval``) — cross-entropy and top-1 from
  logits, in float64; the detectors' tallies in ``detection``, COCO's box AP in
  ``average_precision``;
* ``child`` — the cell: one backend runner (``harness.backends``) loads the
  artifact and runs every held-out batch;
* ``runner`` — the parent: resolve and check everything, run the cell, store
  one ``eval`` record;
* ``table`` — what the command prints.
"""
