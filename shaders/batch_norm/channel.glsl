// Shared by batch_norm/forward.comp and batch_norm/backward.comp: x seen as (N,C,S), S the
// product of the spatial axes (1 for an MLP's (N,C)). A workgroup owns whole channels, so its
// reductions see every element of one channel and nothing else; the includer declares the
// push block p with n, c and s before including this.

// Element i (0 <= i < N*S) of channel c: sample i / S, spatial position i % S.
uint channelElement(uint c, uint i) {
  const uint n = i / p.s;
  return (n * p.c + c) * p.s + (i - n * p.s);
}
