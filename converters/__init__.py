"""The middle layer: conversion hops, one module per hop (Polygraphy's loaders).

A hop takes a source and options and writes an artifact, returning an info
dict of what it used: ``torch_to_onnx``, ``keras_to_onnx``,
``mindspore_to_onnx`` (export hops, run where the framework is imported) and
``onnx_to_int8``, ``onnx_to_fp16``, ``onnx_to_tensorrt`` (build hops);
``onnx_io`` reads, normalizes and describes ONNX files.  Hops know no
database, launcher, CLI or verifier, take their data (calibration batches)
as arguments, and refuse bad input with ``base.ConversionError``.  The
orchestration around them — verify, store, report — is ``dlbench.harness.convert``.
"""
