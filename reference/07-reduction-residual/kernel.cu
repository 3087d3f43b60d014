/*
 * Lab 7 reference: a Jacobi solver's two kernels for the Poisson equation
 * laplace(u) = f on an nx-by-ny grid of spacing h, Dirichlet boundary:
 *
 *   residual_norm2  sum over the interior of r^2,
 *                   r = f - (u[x-1] + u[x+1] + u[y-1] + u[y+1] - 4u) / h^2,
 *                   into one device double, by a deterministic tree reduction;
 *   jacobi_sweep    unew = (u[x-1] + u[x+1] + u[y-1] + u[y+1] - h^2 f) / 4 on the
 *                   interior (the r = 0 equation solved for the centre cell),
 *                   boundary cells copied.
 *
 * What changed since the earlier labs, and why
 * --------------------------------------------
 * The sweep is lab 3's design with lab 1's fixed boundary and a second input:
 * each thread owns a float4 of four cells along x and ROWS rows, and issues
 * every load it needs (ROWS + 2 rows of u, ROWS rows of f, and the cells left
 * and right of its float4) before it computes anything.  A Jacobi sweep moves
 * 12 bytes per cell (read u and f, write unew) where lab 3's sweep moved 8;
 * nothing else changes, and it runs at the copy bandwidth.
 *
 * The residual reads the same window, but instead of writing a grid it adds
 * up one number, r^2, over every interior cell: a reduction.  Three rules
 * make it reproducible:
 *   1. A fixed grid of blocks.  The launcher starts as many blocks as the GPU
 *      holds at once (SM count x resident blocks per SM, from the occupancy
 *      calculator), fewer when there is less work, and each block walks the
 *      grid's work items with a stride of gridDim.x (a grid-stride loop).
 *      Which thread adds which cell, and in which order, is then a function
 *      of nx, ny and the device alone.
 *   2. A fixed tree inside each block.  Every thread first adds its own cells
 *      in order into a double accumulator; then each warp adds its 32 values
 *      with __shfl_down_sync (offsets 16, 8, 4, 2, 1), warp 0 adds the warps'
 *      sums the same way, and thread 0 stores the block's sum in a static
 *      __device__ array of partial sums: no allocation (the launcher may not
 *      call cudaMalloc), the array lives as long as the program.
 *   3. One final pass, by the last block to finish.  Each block, after
 *      storing its partial, bumps an integer counter with atomicAdd; the
 *      block that draws the last ticket adds all the partials, in index
 *      order, with the same in-block tree, writes *d_result and resets the
 *      counter.  Which block comes last varies from run to run; the order in
 *      which it adds the partials does not.  (The alternative is a second,
 *      one-block kernel launched after the first: one more launch, and no
 *      faster on the bench grid; tests/submissions/07-reduction-residual/
 *      good_two_kernels does it that way.)
 * No floating-point atomics anywhere: atomicAdd(double *) would add the
 * blocks' sums in the order in which they happen to finish, and floating-point
 * addition is not associative, so the last bits of the sum would change from
 * run to run (tests/submissions/07-reduction-residual/atomic_add_double).
 *
 * Determinism guarantee (in the style of CUB's documentation)
 * -----------------------------------------------------------
 *   residual_norm2 is run-to-run deterministic: for the same nx, ny, h and
 *   input values, on the same device with the same build, it writes the same
 *   64 bits on every call, whatever the buffers' addresses or alignment (the
 *   float4 and scalar load paths add the same cells in the same order).  It
 *   is not guaranteed to agree bitwise across GPUs with different SM counts
 *   or occupancy (the grid differs, so the order does), across compilers or
 *   flags, or with the CPU's long-double sum; it agrees with those to within
 *   the rounding bound of a sum of positive terms.  (CUB's DeviceReduce makes
 *   the same "run-to-run" promise, on the same GPU.)
 *   The scratch (partials and counter) is one static copy per device, so two
 *   calls must not run at the same time on different streams; calls on one
 *   stream (the harness's case) are ordered.  CUB avoids this by asking the
 *   caller for temporary storage, which this API has no argument for.
 *
 * Where the bandwidth comes from (residual)
 * -----------------------------------------
 *   Compulsory bytes: u and f read once, 8 bytes per cell; nothing is written
 *   but one double.  A kernel that only reads has no stores to overlap its
 *   loads with, so everything rests on keeping loads in flight.  What each
 *   measure below was worth on an H100 is in the answer key (Question 9),
 *   from the development notes in handouts/data/h100/notes.json.
 *   - Streaming loads of f: f is read exactly once; marked "evict first", it
 *     leaves L2 to the rows of u that the next strip reads again (each u row
 *     is read by two work items: as a strip's own row and as the halo row of
 *     the strip next to it).
 *   - Software pipeline: a thread requests the next item's window before it
 *     adds up the current one, so its loads are in flight while it computes.
 *     This costs a second window of registers (3 blocks of 256 threads per
 *     SM instead of 5) and buys a thread that is never without loads.
 *   - The cells left and right of a thread's float4 come from the
 *     neighbouring lanes of its warp (__shfl_up_sync / __shfl_down_sync);
 *     only lanes 0 and 31 load one.  That saves 4 of the 10 load
 *     instructions of a work item; L1 was not the bottleneck, so it buys
 *     fewer instructions rather than speed.
 *   - r is computed in double, as the CPU reference computes it (the float
 *     inputs are exact in double): a few conversions and double operations
 *     per cell, which the memory time hides.  In float, a small r would lose
 *     most of its digits: the Laplacian's terms are up to 2 in magnitude
 *     before the division by h^2.
 *   - The final pass reads at most MAX_BLOCKS doubles: microseconds.
 *
 * Preconditions
 * -------------
 *   Fast path: nx % 4 == 0 and the pointers 16-byte aligned (the harness's
 *   buffers are 256-byte aligned), so every row starts on a 16-byte boundary
 *   and each float4 access is aligned.  Otherwise the scalar path loads the
 *   same quads one cell at a time.  Any nx, ny >= 1: without interior cells
 *   (nx < 3 or ny < 3) the sum is 0 and unew = u.
 *   residual: blockDim = RES_THREADS = 256, 1D grid of at most MAX_BLOCKS
 *   blocks, static shared memory 8 doubles + 1 flag.  Jacobi: blockDim =
 *   JAC_THREADS = 128, 2D grid, several launches when the grid needs more
 *   than 65535 blocks along y; no shared memory.
 *
 * Per-thread contract
 * -------------------
 *   A quad is the four cells x .. x+3 of one row, x a multiple of 4 (the last
 *   quad of a row may stick out past nx - 1 when nx % 4 != 0).
 *   Jacobi: thread t of block (bx, by) owns the quad at x = 4 (bx JAC_THREADS
 *   + t) of rows y0 .. y0+JAC_ROWS-1 (clipped to the grid), y0 = by JAC_ROWS
 *   plus the launch's first row.  It writes exactly those cells.
 *   Residual: the interior rows 1 .. ny-2 are cut into strips of RES_ROWS
 *   rows, each strip's quads into chunks of RES_THREADS quads; a work item
 *   is (strip, chunk), numbered strip-major, and block b takes items b,
 *   b + gridDim.x, b + 2 gridDim.x, ...  Thread t of the block takes quad t of
 *   each chunk (inactive, loading nothing, where that quad starts past
 *   nx - 1), adds the r^2 of its interior cells (row by row, x ascending)
 *   into its accumulator, and joins the tree at the end.
 *
 * Why every edge read is safe
 * ---------------------------
 *   An inactive thread (x >= nx) loads nothing.  Quads: on the fast path
 *   x + 3 <= nx - 1 (nx % 4 == 0); on the scalar path cells past nx - 1 are
 *   not loaded (0 instead).  The window's rows y0-1 .. y0+rows are loaded
 *   only when inside [0, ny); the cell left of the quad only when x > 0, the
 *   cell right of it only when x + 4 < nx.  An interior cell (0 < x+k < nx-1,
 *   0 < y < ny-1) uses rows y-1, y+1 (inside, so loaded) and columns x+k-1,
 *   x+k+1, which are inside the grid: in the quad, the left or right cell a
 *   lane loaded, or a neighbouring lane's quad (that lane is active, since
 *   its first cell is at most nx - 1).  Zeros stand only where a boundary
 *   cell's neighbour would be, and boundary cells use no neighbours.  The
 *   residual's strips cover rows 1 .. ny-2 only, so their window rows
 *   0 .. ny-1 always exist.
 */
#include <cuda_runtime.h>

#include "stencil_lab.h"

/* Tunable (make tune, labs/07-reduction-residual/tune.json): -DTUNE_<NAME>=<value> replaces a default. */
#ifndef TUNE_JAC_ROWS
#define TUNE_JAC_ROWS 2
#endif
#ifndef TUNE_RES_ROWS
#define TUNE_RES_ROWS 2
#endif

constexpr int VEC = 4;               /* cells per quad: one float4 */
constexpr int JAC_THREADS = 128;     /* Jacobi: threads per block, all along x */
constexpr int JAC_ROWS = TUNE_JAC_ROWS; /* Jacobi: rows per thread (coarsening in y) */
constexpr int RES_THREADS = 256;     /* residual: threads per block, all along x */
constexpr int RES_ROWS = TUNE_RES_ROWS; /* residual: rows per work item */
constexpr int WARP = 32;
constexpr int RES_WARPS = RES_THREADS / WARP;
constexpr int MAX_BLOCKS = 4096;     /* residual grid at most: the partials array's size */
constexpr int MAX_GRID_Y = 65535;    /* CUDA's limit on gridDim.y */

static_assert(RES_THREADS % WARP == 0 && RES_WARPS <= WARP, "warp 0 adds one value per warp");

/* The residual's scratch, one copy per device (a static __device__ array: the
 * launcher may not allocate).  g_blocks_done is 0 between calls: the last
 * block of every call resets it. */
static __device__ double g_partials[MAX_BLOCKS];
static __device__ unsigned int g_blocks_done = 0;

/* ------------------------------------------------------------- shared loads */

/* Component k (0..3) of a quad; k is a compile-time constant after unrolling. */
__device__ __forceinline__ float quad_at(const float4 &q, int k)
{
    return k == 0 ? q.x : k == 1 ? q.y : k == 2 ? q.z : q.w;
}

__device__ __forceinline__ void quad_set(float4 &q, int k, float v)
{
    if (k == 0) q.x = v; else if (k == 1) q.y = v; else if (k == 2) q.z = v; else q.w = v;
}

/* One cell; STREAM: a streaming load (__ldcs, "evict first"), for data read
 * exactly once, so that the L2 cache keeps what will be read again. */
template <bool STREAM>
__device__ __forceinline__ float load_cell(const float *__restrict__ p)
{
    return STREAM ? __ldcs(p) : *p;
}

/* Cells x .. x+3 of `row` (x < nx).  Fast path: one aligned 16-byte load.
 * Scalar path: one load per cell inside the row, 0 for cells past nx - 1. */
template <bool VEC4, bool STREAM = false>
__device__ __forceinline__ float4 load_quad(const float *__restrict__ row, int x, int nx)
{
    if (VEC4) {
        const float4 *q = reinterpret_cast<const float4 *>(row + x);
        return STREAM ? __ldcs(q) : *q;
    }
    float4 q;
    q.x = load_cell<STREAM>(row + x);
    q.y = x + 1 < nx ? load_cell<STREAM>(row + x + 1) : 0.0f;
    q.z = x + 2 < nx ? load_cell<STREAM>(row + x + 2) : 0.0f;
    q.w = x + 3 < nx ? load_cell<STREAM>(row + x + 3) : 0.0f;
    return q;
}

template <bool VEC4>
__device__ __forceinline__ void store_quad(float *__restrict__ row, int x, int nx, const float4 &q)
{
    if (VEC4) {
        *reinterpret_cast<float4 *>(row + x) = q;
        return;
    }
    row[x] = q.x;
    if (x + 1 < nx) row[x + 1] = q.y;
    if (x + 2 < nx) row[x + 2] = q.z;
    if (x + 3 < nx) row[x + 3] = q.w;
}

/* What one thread needs for the quads at column x of rows y0 .. y0+R-1. */
template <int R>
struct Window {
    float4 u[R + 2];  /* u[j]: u's quad of row y0-1+j (north of the first row .. south of the last) */
    float4 f[R];      /* f[j]: f's quad of row y0+j */
    float west[R];    /* u at (x-1, y0+j), 0 when x == 0 */
    float east[R];    /* u at (x+4, y0+j), 0 when x+4 >= nx */
};

/* Issues every load of the window before any is used, so that they are all
 * in flight together.  rows (1..R) is how many of the R rows exist; rows
 * outside [0, ny), cells outside the grid and every cell of an inactive
 * thread (active == false: x >= nx) read as 0 and are never used by an
 * interior cell (see the header).
 * LANES == false: the thread loads its west and east cells itself (4-byte
 * loads, mostly L1 hits: its neighbours load the same lines).
 * LANES == true: only lane 0 of the warp loads its west cell and lane 31 its
 * east cell; exchange_x() then hands every other lane its neighbours' values.
 * STREAM_F: f is loaded with streaming loads (read once, evict first). */
template <bool VEC4, bool LANES, bool STREAM_F, int R>
__device__ __forceinline__ void load_window(const float *__restrict__ u, const float *__restrict__ f,
                                            int nx, int ny, int x, int y0, int rows, bool active,
                                            Window<R> &w)
{
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int lane = threadIdx.x % WARP;
    const bool west_here = !LANES || lane == 0, east_here = !LANES || lane == WARP - 1;
#pragma unroll
    for (int j = 0; j < R + 2; j++) {
        const int y = y0 - 1 + j;
        w.u[j] = (active && j <= rows + 1 && y >= 0 && y < ny) ? load_quad<VEC4>(u + (size_t)y * nx, x, nx)
                                                                : zero;
    }
#pragma unroll
    for (int j = 0; j < R; j++) {
        const bool here = active && j < rows;
        const size_t row = (size_t)(y0 + j) * nx;
        w.f[j] = here ? load_quad<VEC4, STREAM_F>(f + row, x, nx) : zero;
        w.west[j] = here && west_here && x > 0 ? u[row + x - 1] : 0.0f;
        w.east[j] = here && east_here && x + VEC < nx ? u[row + x + VEC] : 0.0f;
    }
}

/* After load_window<..., LANES = true, ...>: lane l's west cell is the last
 * cell of lane l-1's quad (x - 1), its east cell the first of lane l+1's
 * (x + 4); lanes 0 and 31 keep the cells they loaded.  Every lane of the warp
 * must call it together (the shuffles name all 32).  A lane whose neighbour
 * lane is inactive receives 0, which only a cell past nx - 2 would use. */
template <int R>
__device__ __forceinline__ void exchange_x(Window<R> &w)
{
    const int lane = threadIdx.x % WARP;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const float left = __shfl_up_sync(0xffffffffu, w.u[j + 1].w, 1);
        const float right = __shfl_down_sync(0xffffffffu, w.u[j + 1].x, 1);
        if (lane > 0)
            w.west[j] = left;
        if (lane < WARP - 1)
            w.east[j] = right;
    }
}

/* --------------------------------------------------------------- Jacobi sweep */

/* One cell of the sweep, in the order of the CPU reference:
 * ((west + east) + north) + south, minus h^2 f, over 4 (exact: a power of 2). */
__device__ __forceinline__ float jacobi_cell(float west, float east, float north, float south, float fv,
                                             float h2)
{
    const float s = ((west + east) + north) + south;
    return (s - h2 * fv) * 0.25f;
}

template <bool VEC4>
__global__ void __launch_bounds__(JAC_THREADS)
jacobi_kernel(const float *__restrict__ u, float *__restrict__ unew, const float *__restrict__ f,
              int nx, int ny, float h2, int y_first)
{
    const int x = (blockIdx.x * JAC_THREADS + threadIdx.x) * VEC;
    if (x >= nx)
        return;
    const int y0 = y_first + blockIdx.y * JAC_ROWS;
    const int rows = ny - y0 < JAC_ROWS ? ny - y0 : JAC_ROWS;

    Window<JAC_ROWS> w;
    load_window<VEC4, false, false>(u, f, nx, ny, x, y0, rows, true, w);

#pragma unroll
    for (int j = 0; j < JAC_ROWS; j++) {
        if (j >= rows)
            break;
        const int y = y0 + j;
        const float4 north = w.u[j], mid = w.u[j + 1], south = w.u[j + 2];
        float4 o = mid;                                   /* boundary cells: copied, bit for bit */
        if (y > 0 && y < ny - 1) {
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                if (x + k > 0 && x + k < nx - 1) {
                    const float west = k == 0 ? w.west[j] : quad_at(mid, k - 1);
                    const float east = k == VEC - 1 ? w.east[j] : quad_at(mid, k + 1);
                    quad_set(o, k, jacobi_cell(west, east, quad_at(north, k), quad_at(south, k),
                                               quad_at(w.f[j], k), h2));
                }
            }
        }
        store_quad<VEC4>(unew + (size_t)y * nx, x, nx, o);
    }
}

extern "C" void jacobi_sweep(const float *d_u, float *d_unew, const float *d_f, int nx, int ny,
                             float h, cudaStream_t stream)
{
    const bool vec4 = nx % VEC == 0 && (size_t)d_u % 16 == 0 && (size_t)d_unew % 16 == 0 &&
                      (size_t)d_f % 16 == 0;
    const float h2 = h * h;                               /* in float, as the CPU reference */
    const int quads = (nx + VEC - 1) / VEC;
    const int blocks_x = (quads + JAC_THREADS - 1) / JAC_THREADS;
    const int strips = (ny + JAC_ROWS - 1) / JAC_ROWS;
    /* gridDim.y is at most 65535: a taller grid takes several launches. */
    for (int s = 0; s < strips; s += MAX_GRID_Y) {
        const dim3 grid(blocks_x, strips - s < MAX_GRID_Y ? strips - s : MAX_GRID_Y);
        if (vec4)
            jacobi_kernel<true><<<grid, JAC_THREADS, 0, stream>>>(d_u, d_unew, d_f, nx, ny, h2,
                                                                  s * JAC_ROWS);
        else
            jacobi_kernel<false><<<grid, JAC_THREADS, 0, stream>>>(d_u, d_unew, d_f, nx, ny, h2,
                                                                   s * JAC_ROWS);
    }
}

/* ----------------------------------------------------------------- residual */

/* r at one interior cell, in double as the CPU reference computes it: the
 * floats are exact in double, the neighbours are added in the same order,
 * and 4u is exact; only 1/h^2 is multiplied instead of divided by h^2 (a
 * double division is a dozen instructions; the two differ by an ulp). */
__device__ __forceinline__ double residual_cell(double west, double east, double north, double south,
                                                double centre, double fv, double inv_h2)
{
    const double lap = ((((west + east) + north) + south) - 4.0 * centre) * inv_h2;
    return fv - lap;
}

/*
 * The sum of v over the block, in a fixed order: a shuffle tree in each warp
 * (lane i adds lane i+16, then i+8, ... : lane 0 ends with the warp's sum),
 * the warps' sums through shared memory, then the same tree in warp 0.  Every
 * thread of the block must call it (it has a barrier); the result is valid in
 * thread 0.  warp_sums: RES_WARPS doubles of shared memory, free on entry.
 */
__device__ __forceinline__ double block_sum(double v, double *warp_sums)
{
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
#pragma unroll
    for (int offset = WARP / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    v = 0.0;
    if (warp == 0) {
        v = lane < RES_WARPS ? warp_sums[lane] : 0.0;
#pragma unroll
        for (int offset = WARP / 2; offset > 0; offset /= 2)
            v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

/* Where this thread works in item (s, c): its quad's column x, the item's
 * first row y0 (interior rows only) and its row count, and whether x is
 * inside the grid.  Only meaningful for s < strips. */
struct Item {
    int x, y0, rows;
    bool active;
};

__device__ __forceinline__ Item residual_item(unsigned s, unsigned c, int nx, int ny)
{
    Item it;
    it.x = (int)((c * RES_THREADS + threadIdx.x) * VEC);
    it.y0 = 1 + (int)s * RES_ROWS;
    it.rows = ny - 1 - it.y0 < RES_ROWS ? ny - 1 - it.y0 : RES_ROWS;
    it.active = it.x < nx;
    return it;
}

template <bool VEC4>
__global__ void __launch_bounds__(RES_THREADS)
residual_kernel(const float *__restrict__ u, const float *__restrict__ f, int nx, int ny,
                double inv_h2, unsigned strips, unsigned chunks, double *__restrict__ result)
{
    __shared__ double warp_sums[RES_WARPS];
    __shared__ bool last_block;

    /* 1. This thread's cells, in a fixed order, into one double.  Work item
     *    (s, c) is strip s, chunk c; the grid-stride step of gridDim.x items
     *    is (ds strips, dc chunks), carried by hand: no division in the loop.
     *    Software pipeline: the next item's window is requested before the
     *    current one is added up, so the loads of one item are in flight
     *    while the thread computes the one before.  s and c are the same in
     *    every thread of the block, so whole warps iterate together (the
     *    shuffles of exchange_x need all 32 lanes). */
    double acc = 0.0;
    unsigned s = blockIdx.x / chunks, c = blockIdx.x % chunks;
    const unsigned ds = gridDim.x / chunks, dc = gridDim.x % chunks;
    Item it = residual_item(s, c, nx, ny);
    Window<RES_ROWS> w;
    load_window<VEC4, true, true>(u, f, nx, ny, it.x, it.y0, it.rows, it.active && s < strips, w);
    while (s < strips) {
        unsigned s_next = s + ds, c_next = c + dc;
        if (c_next >= chunks) {
            c_next -= chunks;
            s_next += 1;
        }
        const Item it_next = residual_item(s_next, c_next, nx, ny);
        Window<RES_ROWS> w_next;
        load_window<VEC4, true, true>(u, f, nx, ny, it_next.x, it_next.y0, it_next.rows,
                                      it_next.active && s_next < strips, w_next);

        exchange_x(w);
#pragma unroll
        for (int j = 0; j < RES_ROWS; j++) {
            if (j >= it.rows)
                break;                                           /* uniform */
            const float4 north = w.u[j], mid = w.u[j + 1], south = w.u[j + 2];
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                if (it.x + k > 0 && it.x + k < nx - 1) {         /* false for an inactive thread */
                    const float west = k == 0 ? w.west[j] : quad_at(mid, k - 1);
                    const float east = k == VEC - 1 ? w.east[j] : quad_at(mid, k + 1);
                    const double r = residual_cell(west, east, quad_at(north, k), quad_at(south, k),
                                                   quad_at(mid, k), quad_at(w.f[j], k), inv_h2);
                    acc = fma(r, r, acc);   /* explicit: the same rounding whatever the flags */
                }
            }
        }
        w = w_next;
        it = it_next;
        s = s_next;
        c = c_next;
    }

    /* 2. The block's sum, by the fixed tree; thread 0 stores it as this block's
     *    partial and takes a ticket.  The fence makes the partial visible to
     *    the whole device before the counter says it is there. */
    const double block_total = block_sum(acc, warp_sums);
    if (threadIdx.x == 0) {
        g_partials[blockIdx.x] = block_total;
        __threadfence();
        const unsigned ticket = atomicAdd(&g_blocks_done, 1u);   /* an integer atomic: exact */
        last_block = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (!last_block)
        return;                                  /* uniform: the whole block leaves */

    /* 3. The last block adds every partial, in index order, by the same tree.
     *    Every other block fenced its partial before its ticket, and this
     *    block's ticket came after all of theirs; the fence below orders this
     *    block's reads after that, and __ldcg reads through L2 (L1 is not
     *    coherent between SMs). */
    __threadfence();
    double v = 0.0;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += RES_THREADS)
        v += __ldcg(&g_partials[i]);
    const double total = block_sum(v, warp_sums);
    if (threadIdx.x == 0) {
        *result = total;
        g_blocks_done = 0;   /* for the next call: the next kernel on the stream starts after this one */
    }
}

/* Blocks of residual_kernel that the current device holds at once, at most
 * MAX_BLOCKS: a function of the device (and of this build's register count),
 * never of timing.  Looked up once per device: the occupancy calculator costs
 * microseconds of host time, and this launcher is called once per sweep. */
static unsigned resident_blocks(void)
{
    static int cached_device = -1;
    static unsigned cached_blocks = 1;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess)
        return cached_blocks;
    if (device != cached_device) {
        int sms = 1, per_sm = 1;
        if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
            sms = 1;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, residual_kernel<true>, RES_THREADS, 0) !=
            cudaSuccess)
            per_sm = 1;
        const long long blocks = (long long)sms * per_sm;
        cached_blocks = blocks < 1 ? 1u : blocks > MAX_BLOCKS ? (unsigned)MAX_BLOCKS : (unsigned)blocks;
        cached_device = device;
    }
    return cached_blocks;
}

extern "C" void residual_norm2(const float *d_u, const float *d_f, int nx, int ny, float h,
                               double *d_result, cudaStream_t stream)
{
    const bool vec4 = nx % VEC == 0 && (size_t)d_u % 16 == 0 && (size_t)d_f % 16 == 0;
    const unsigned strips = ny > 2 ? (unsigned)(ny - 2 + RES_ROWS - 1) / RES_ROWS : 0u;
    const unsigned quads = (unsigned)(nx + VEC - 1) / VEC;
    const unsigned chunks = (quads + RES_THREADS - 1) / RES_THREADS;
    const unsigned long long items = (unsigned long long)strips * chunks;
    /* The grid: every resident block, or one per work item when there are fewer
     * (at least one, which writes 0 when there is no interior). */
    unsigned blocks = resident_blocks();
    if (items < blocks)
        blocks = items > 0 ? (unsigned)items : 1u;
    const double h2 = (double)h * (double)h;
    const double inv_h2 = 1.0 / h2;
    /* Both paths add the same cells in the same order: the same bits. */
    if (vec4)
        residual_kernel<true><<<blocks, RES_THREADS, 0, stream>>>(d_u, d_f, nx, ny, inv_h2, strips,
                                                                  chunks, d_result);
    else
        residual_kernel<false><<<blocks, RES_THREADS, 0, stream>>>(d_u, d_f, nx, ny, inv_h2, strips,
                                                                   chunks, d_result);
}
