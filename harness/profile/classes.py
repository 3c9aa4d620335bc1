"""Op types by class, declared once: the profile's rows, the advisor's reasons.

ONNX's op types (and ONNX Runtime's fused ones), the node types of OpenVINO's CPU plugin
(``Convolution``, ``FullyConnected``, its ``Reorder``) and PyTorch's ``aten::`` ops share
the classes, so a model's profile on any of the three reads the same way.
"""

from __future__ import annotations

OP_CLASSES: dict[str, tuple[str, ...]] = {
    "convolution": (
        "Conv",
        "FusedConv",
        "NchwcConv",
        "QLinearConv",
        "ConvInteger",
        "ConvTranspose",
        "Convolution",
        "GroupConvolution",
        "ConvolutionBackpropData",
        "Deconvolution",
    ),
    "matmul / gemm": (
        "MatMul",
        "FusedMatMul",
        "Gemm",
        "FusedGemm",
        "QGemm",
        "MatMulInteger",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
        "QLinearMatMul",
        "MatMulNBits",
        "Einsum",
        "FullyConnected",
    ),
    "attention": (
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "QAttention",
        "ScaledDotProductAttention",
    ),
    "quantize / dequantize": ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "FakeQuantize"),
    "normalization": (
        "LayerNormalization",
        "SkipLayerNormalization",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "BatchNormalization",
        "InstanceNormalization",
        "GroupNorm",
        "MVN",
        "NormalizeL2",
    ),
    "softmax": ("Softmax", "LogSoftmax", "SoftMax"),
    "activation": (
        "Relu",
        "Gelu",
        "FastGelu",
        "BiasGelu",
        "QuickGelu",
        "Sigmoid",
        "Tanh",
        "HardSigmoid",
        "HardSwish",
        "Erf",
        "Clip",
        "LeakyRelu",
        "Elu",
        "Selu",
        "Softplus",
        "Mish",
        "QLinearSigmoid",
        "QLinearLeakyRelu",
        "Clamp",
        "Swish",
        "HSwish",
        "HSigmoid",
        "SoftPlus",
        "PRelu",
    ),
    "pooling": (
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
        "AvgPool",
        "AdaptiveAvgPool",
        "AdaptiveMaxPool",
        "Pooling",
    ),
    "reduction": (
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ArgMax",
        "TopK",
        "Reduce",
    ),
    "layout (NCHWc reorder)": ("ReorderInput", "ReorderOutput", "Reorder"),
    "elementwise": (
        "Add",
        "Mul",
        "Sub",
        "Div",
        "Pow",
        "Sqrt",
        "QLinearAdd",
        "QLinearMul",
        "Where",
        "Cast",
        "Eltwise",
        "Subgraph",
        "Multiply",
        "Subtract",
        "Divide",
        "Power",
        "Convert",
        "Select",
    ),
    "data movement": (
        "Reshape",
        "Transpose",
        "Concat",
        "QLinearConcat",
        "Split",
        "Slice",
        "Gather",
        "Expand",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Shape",
        "Pad",
        "Tile",
        "Resize",
        "Concatenation",
        "StridedSlice",
        "Broadcast",
        "ShapeOf",
        "VariadicSplit",
        "Interpolate",
    ),
}
ATEN = "aten::"


def _ops(names: str) -> tuple[str, ...]:
    return tuple(names.split())


# PyTorch's ops by the same classes, without their ``aten::`` prefix; an in-place variant
# (``relu_``) is its op's.  Both the op a model calls (``conv2d``, ``linear``) and the ones
# it dispatches to (``mkldnn_convolution``, ``addmm``) are here: a profile names the first,
# and the second where the first is not declared.
ATEN_CLASSES: dict[str, tuple[str, ...]] = {
    "convolution": _ops(
        "conv1d conv2d conv3d convolution _convolution conv_transpose1d conv_transpose2d "
        "conv_transpose3d mkldnn_convolution cudnn_convolution cudnn_convolution_transpose "
        "miopen_convolution _slow_conv2d_forward slow_conv_transpose2d _conv_depthwise2d "
        "conv_depthwise3d _nnpack_spatial_convolution"
    ),
    "matmul / gemm": _ops(
        "linear matmul mm addmm _addmm_activation bmm baddbmm addbmm mv addmv dot einsum "
        "bilinear mkldnn_linear _int_mm _scaled_mm"
    ),
    "attention": _ops(
        "scaled_dot_product_attention _scaled_dot_product_attention_math "
        "_scaled_dot_product_flash_attention _scaled_dot_product_flash_attention_for_cpu "
        "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention "
        "_flash_attention_forward _efficient_attention_forward _native_multi_head_attention "
        "_transformer_encoder_layer_fwd"
    ),
    "quantize / dequantize": _ops(
        "quantize_per_tensor quantize_per_channel quantize_per_tensor_dynamic dequantize"
    ),
    "normalization": _ops(
        "batch_norm _batch_norm_impl_index native_batch_norm _native_batch_norm_legit "
        "_native_batch_norm_legit_no_training cudnn_batch_norm instance_norm layer_norm "
        "native_layer_norm group_norm native_group_norm rms_norm _fused_rms_norm"
    ),
    "softmax": _ops("softmax _softmax _safe_softmax log_softmax _log_softmax"),
    "activation": _ops(
        "relu relu6 gelu silu sigmoid tanh hardsigmoid hardswish hardtanh erf clamp clamp_min "
        "clamp_max threshold leaky_relu elu selu celu softplus mish prelu _prelu_kernel glu "
        "log_sigmoid"
    ),
    "pooling": _ops(
        "max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices "
        "mkldnn_max_pool2d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
        "adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d "
        "mkldnn_adaptive_avg_pool2d adaptive_max_pool1d adaptive_max_pool2d"
    ),
    "reduction": _ops(
        "mean sum prod amax amin max min argmax argmin topk norm linalg_vector_norm var std "
        "var_mean std_mean logsumexp cumsum"
    ),
    "layout (NCHWc reorder)": _ops("to_mkldnn to_dense"),
    "elementwise": _ops(
        "add sub rsub mul div pow sqrt rsqrt exp log neg abs reciprocal square maximum "
        "minimum where addcmul addcdiv lerp eq ne lt le gt ge logical_and logical_or "
        "logical_not masked_fill to _to_copy type_as"
    ),
    "data movement": _ops(
        "view reshape _reshape_alias _unsafe_view flatten unflatten permute transpose t "
        "contiguous clone copy cat stack split split_with_sizes chunk unbind slice select "
        "narrow index index_select gather scatter embedding expand repeat squeeze unsqueeze "
        "pad constant_pad_nd reflection_pad2d replication_pad2d upsample_nearest2d "
        "upsample_bilinear2d _upsample_nearest_exact2d pixel_shuffle roll flip as_strided "
        "empty empty_like empty_strided zeros zeros_like ones ones_like full fill zero arange "
        "detach alias lift_fresh resize"
    ),
}
_BY_TYPE = {op: cls for cls, ops in OP_CLASSES.items() for op in ops} | {
    ATEN + op: cls for cls, ops in ATEN_CLASSES.items() for op in ops
}
OTHER = "other"


def op_class(op_type: str) -> str:
    found = _BY_TYPE.get(op_type)
    if found is None and op_type.startswith(ATEN) and op_type.endswith("_"):
        found = _BY_TYPE.get(op_type[:-1])  # aten::relu_ is aten::relu, in place
    return found or OTHER


def node_class(node: dict) -> str:
    """A profiled node's class: its op's, else the class of the op it spent its time in
    (``kernel``: a PyTorch op the model called that dispatches to a declared one)."""
    found = op_class(node["op"])
    return op_class(node["kernel"]) if found == OTHER and node.get("kernel") else found
