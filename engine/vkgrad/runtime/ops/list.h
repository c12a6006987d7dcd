// The registration list: one line per node kind, VKGRAD_OP(Kind). It makes graph::OpKind and
// the table opDef() reads; everything else about a kind is in its op file, ops/<op>.cpp,
// which defines `const OpDef k<Kind>` in namespace vkgrad::graph::defs.
// No include guard: op.h and registry.cpp include it with their own VKGRAD_OP.

// views: no kernel, no memory of their own (ops/view.cpp)
VKGRAD_OP(Reshape)
VKGRAD_OP(Slice)
// forward ops and their backward nodes (added by autograd), side by side
VKGRAD_OP(Gather)  // ops/gather.cpp
VKGRAD_OP(GatherBackward)
VKGRAD_OP(Matmul)  // ops/matmul.cpp
VKGRAD_OP(MatmulBackward)
VKGRAD_OP(Add)  // ops/add.cpp
VKGRAD_OP(AddBackward)
VKGRAD_OP(Mul)  // ops/mul.cpp
VKGRAD_OP(MulBackward)
VKGRAD_OP(Activation)  // ops/activation.cpp
VKGRAD_OP(ActivationBackward)
VKGRAD_OP(LayerNorm)  // ops/layer_norm.cpp
VKGRAD_OP(LayerNormBackward)
VKGRAD_OP(RmsNorm)  // ops/rms_norm.cpp
VKGRAD_OP(RmsNormBackward)
VKGRAD_OP(Rope)  // ops/rope.cpp
VKGRAD_OP(RopeBackward)
VKGRAD_OP(Swiglu)  // ops/swiglu.cpp
VKGRAD_OP(SwigluBackward)
VKGRAD_OP(CrossEntropy)  // ops/cross_entropy.cpp
VKGRAD_OP(CrossEntropyBackward)
VKGRAD_OP(Attention)  // ops/attention.cpp
VKGRAD_OP(AttentionBackward)
VKGRAD_OP(Dropout)  // ops/dropout.cpp
VKGRAD_OP(DropoutBackward)
VKGRAD_OP(TopKWeights)  // ops/sample.cpp
VKGRAD_OP(Categorical)
VKGRAD_OP(ZeroFill)  // ops/zero_fill.cpp
VKGRAD_OP(CachedAttention)  // ops/cached_attention.cpp: decoding, not differentiable
// general ops (numpy semantics): any rank up to 6, broadcasting on both sides, any axes
VKGRAD_OP(Binary)     // ops/binary.cpp: add, sub, mul, div broadcast on both sides
VKGRAD_OP(Where)      // ops/where.cpp
VKGRAD_OP(Reduce)     // ops/reduce.cpp: sum, mean, max over any axes
VKGRAD_OP(Expand)     // ops/expand.cpp
VKGRAD_OP(MapReduce)  // ops/map_reduce.cpp: the general ops' gradients
VKGRAD_OP(Transpose)  // ops/transpose.cpp
VKGRAD_OP(SliceAxis)  // ops/slice_axis.cpp: slices with steps on any axis, split
VKGRAD_OP(SliceAxisBackward)
VKGRAD_OP(Concat)   // ops/concat.cpp
VKGRAD_OP(Softmax)  // ops/softmax.cpp: softmax and log-softmax on any axis
VKGRAD_OP(SoftmaxBackward)
VKGRAD_OP(LogSoftmax)
VKGRAD_OP(LogSoftmaxBackward)
// data and evaluation: not differentiable
VKGRAD_OP(BytesToFloat)  // ops/bytes_to_float.cpp
VKGRAD_OP(Confusion)     // ops/confusion.cpp
VKGRAD_OP(Augment)       // ops/augment.cpp
// vision transformer: images to patch rows, the class token in front, its row taken back
VKGRAD_OP(Patchify)  // ops/patchify.cpp
VKGRAD_OP(PatchifyBackward)
VKGRAD_OP(PrependToken)  // ops/prepend_token.cpp
VKGRAD_OP(PrependTokenBackward)
VKGRAD_OP(TakeRow)  // ops/take_row.cpp
VKGRAD_OP(TakeRowBackward)
// variational autoencoder: the sample and the two loss terms; a running sum for evaluation
VKGRAD_OP(Reparameterize)  // ops/reparameterize.cpp
VKGRAD_OP(ReparameterizeBackward)
VKGRAD_OP(ReconstructionLoss)  // ops/vae_loss.cpp
VKGRAD_OP(ReconstructionLossBackward)
VKGRAD_OP(GaussianKl)
VKGRAD_OP(GaussianKlBackward)
VKGRAD_OP(RunningTotal)  // ops/running_total.cpp
// graph neural networks: aggregation and attention over a sparse graph (runtime/sparse.h),
// pooling over a batch's graphs
VKGRAD_OP(Spmm)  // ops/spmm.cpp
VKGRAD_OP(SpmmBackward)
VKGRAD_OP(EdgeSoftmax)  // ops/edge_softmax.cpp
VKGRAD_OP(EdgeSoftmaxBackward)
VKGRAD_OP(SegmentPool)  // ops/segment_pool.cpp
VKGRAD_OP(SegmentPoolBackward)
// convolutional networks, NCHW: convolution and pooling
VKGRAD_OP(Conv2d)  // ops/conv2d.cpp
VKGRAD_OP(Conv2dBackward)
VKGRAD_OP(MaxPool2d)  // ops/pool2d.cpp
VKGRAD_OP(MaxPool2dBackward)
VKGRAD_OP(AvgPool2d)
VKGRAD_OP(AvgPool2dBackward)
// convolutional networks: batch norm (training updates its running statistics in place),
// padding, global average pooling
VKGRAD_OP(BatchNorm)  // ops/batch_norm.cpp
VKGRAD_OP(BatchNormInference)
VKGRAD_OP(BatchNormBackward)
VKGRAD_OP(Pad)  // ops/pad.cpp
VKGRAD_OP(PadBackward)
VKGRAD_OP(GlobalAvgPool)  // ops/global_avg_pool.cpp
VKGRAD_OP(GlobalAvgPoolBackward)
// optimizer (training/optimizer.h): update persistent state in place (ops/optimizer.cpp)
VKGRAD_OP(AdvanceStep)
VKGRAD_OP(ClipGradNorm)
VKGRAD_OP(LossScaleUpdate)
VKGRAD_OP(SgdUpdate)
VKGRAD_OP(AdamWUpdate)
