"""Convolutions: conv1d, conv2d (NHWC and NCHW), conv3d, depthwise and separable conv2d,
and the transposed convolutions, with strides, padding and dilation in value and gradient."""
