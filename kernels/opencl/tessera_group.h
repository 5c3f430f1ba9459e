// tessera_group.h: the work-group sum of the two-step dot products (cg.cl, dot.cl).
//
// Needs T and ZERO (tessera_types.h) and WG, a -D macro: the work-group size, a power of
// two on GPUs, 1 on CPU devices (each work-group one work-item, which sums a contiguous
// chunk). OpenCL has no grid-wide barrier, so a dot product is two steps: each work-group
// stores one partial sum (group_store), and a later launch adds the partial sums.

// The work-group's sum of acc (each work-item's own) into dst[group]: a tree in `red`
// (local memory of WG elements).
inline void group_store(const T acc, __local T *red, __global T *dst)
{
#if WG > 1
    const int lid = get_local_id(0);
    red[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) dst[get_group_id(0)] = red[0];
#else
    dst[get_group_id(0)] = acc;
#endif
}
