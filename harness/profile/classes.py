"""Op types by class, declared once: the profile's rows, the advisor's reasons."""

from __future__ import annotations

OP_CLASSES: dict[str, tuple[str, ...]] = {
    "convolution": ("Conv", "FusedConv", "NchwcConv", "QLinearConv", "ConvInteger", "ConvTranspose"),
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
    ),
    "attention": ("Attention", "MultiHeadAttention", "GroupQueryAttention", "QAttention"),
    "quantize / dequantize": ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"),
    "normalization": (
        "LayerNormalization",
        "SkipLayerNormalization",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "BatchNormalization",
        "InstanceNormalization",
        "GroupNorm",
    ),
    "softmax": ("Softmax", "LogSoftmax"),
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
    ),
    "pooling": (
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "QLinearGlobalAveragePool",
        "QLinearAveragePool",
    ),
    "reduction": ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ArgMax", "TopK"),
    "layout (NCHWc reorder)": ("ReorderInput", "ReorderOutput"),
    "elementwise": ("Add", "Mul", "Sub", "Div", "Pow", "Sqrt", "QLinearAdd", "QLinearMul", "Where", "Cast"),
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
    ),
}
_BY_TYPE = {op: cls for cls, ops in OP_CLASSES.items() for op in ops}
OTHER = "other"


def op_class(op_type: str) -> str:
    return _BY_TYPE.get(op_type, OTHER)
