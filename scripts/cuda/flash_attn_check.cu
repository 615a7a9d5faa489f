// flash_attn_check.cu - gglua-flash-attn.cuh alone on a GPU: its values and
// gradients against a double-precision reference of the bf16-rounded
// inputs, then the forward's and backward's times at a GPT's shape. A
// developer's check before the full library build (tests/gpu/library.lua
// checks the kernels inside ggml against the CPU's):
//
//   nvcc -O3 -arch=sm_90 -use_fast_math -o check scripts/cuda/flash_attn_check.cu && ./check
//   compute-sanitizer ./check only     # the checks alone, for out-of-bounds accesses
#include "gglua-flash-attn.cuh"

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static float bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

struct Case { int B, H, Tq, Tk, D; bool causal; };

// One case: q, k, v, dO rows inside [B][T][3][H][D] buffers (a projection's
// layout: strided heads), outputs compared with the reference.
static bool run(const Case & c, bool timeit) {
    const int B = c.B, H = c.H, D = c.D;
    const int T = c.Tq > c.Tk ? c.Tq : c.Tk;
    const size_t n = (size_t) B * T * 3 * H * D;
    std::vector<float> x(n), g((size_t) B * c.Tq * H * D);
    srand(7);
    for (auto & v : x) v = (float) rand() / RAND_MAX * 2 - 1;
    for (auto & v : g) v = (float) rand() / RAND_MAX * 2 - 1;
    float *dx, *dg, *grads, *delta;
    __nv_bfloat16 * fwd; // the output in bf16, then the log-sum-exp's f32s
    const size_t nq = (size_t) B * c.Tq * H * D, nk = (size_t) B * c.Tk * H * D;
    CHECK(cudaMalloc(&dx, n * 4));
    CHECK(cudaMalloc(&dg, g.size() * 4));
    CHECK(cudaMalloc(&fwd, nq * 2 + (size_t) B * H * c.Tq * 4));
    CHECK(cudaMalloc(&grads, (nq + 2 * nk) * 4));
    CHECK(cudaMalloc(&delta, (size_t) B * H * c.Tq * 4));
    CHECK(cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dg, g.data(), g.size() * 4, cudaMemcpyHostToDevice));
    const int64_t nb1 = 3 * H * D * 4, nb2 = D * 4, nb3 = (int64_t) T * nb1;
    gglua_fa_params p = {};
    p.q = {(const char *) dx, nb1, nb2, nb3, true};
    p.k = {(const char *) (dx + H * D), nb1, nb2, nb3, true};
    p.v = {(const char *) (dx + 2 * H * D), nb1, nb2, nb3, true};
    p.go = {(const char *) dg, (int64_t) H * D * 4, D * 4, (int64_t) c.Tq * H * D * 4, true};
    p.out = fwd;
    p.lse = (float *) (fwd + nq);
    p.dq = grads;
    p.dk = grads + nq;
    p.dv = grads + nq + nk;
    p.delta = delta;
    p.Tq = c.Tq, p.Tk = c.Tk, p.H = H, p.B = B;
    p.scale = 1.0f / sqrtf((float) D);
    p.causal = c.causal;
    gglua_fa_forward(D, p, 0);
    gglua_fa_backward(D, p, 0);
    CHECK(cudaDeviceSynchronize());
    std::vector<__nv_bfloat16> ob(nq);
    std::vector<float> o(nq), gr(nq + 2 * nk);
    CHECK(cudaMemcpy(ob.data(), fwd, nq * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < nq; i++) o[i] = __bfloat162float(ob[i]);
    CHECK(cudaMemcpy(gr.data(), grads, gr.size() * 4, cudaMemcpyDeviceToHost));
    double worst[4] = {0, 0, 0, 0};
    if (!timeit) {
        auto at = [&](int which, int b, int t, int h, int d) { return bf16(x[(((size_t) b * T + t) * 3 + which) * H * D + h * D + d]); };
        for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) {
            std::vector<double> dk((size_t) c.Tk * D, 0), dv((size_t) c.Tk * D, 0);
            for (int i = 0; i < c.Tq; i++) {
                const int keys = c.causal ? (i + 1 < c.Tk ? i + 1 : c.Tk) : c.Tk;
                std::vector<double> s(keys), dp(keys);
                double mx = -1e300, sum = 0;
                for (int j = 0; j < keys; j++) {
                    double acc = 0;
                    for (int d = 0; d < D; d++) acc += (double) at(0, b, i, h, d) * at(1, b, j, h, d);
                    s[j] = acc * p.scale;
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j < keys; j++) sum += (s[j] = exp(s[j] - mx));
                const float * gi = &g[(((size_t) b * c.Tq + i) * H + h) * D];
                double dsum = 0;
                for (int j = 0; j < keys; j++) {
                    s[j] /= sum;
                    double acc = 0;
                    for (int d = 0; d < D; d++) acc += (double) bf16(gi[d]) * at(2, b, j, h, d);
                    dp[j] = acc;
                    dsum += s[j] * acc;
                }
                for (int d = 0; d < D; d++) {
                    double out = 0, dq = 0;
                    for (int j = 0; j < keys; j++) {
                        out += s[j] * at(2, b, j, h, d);
                        dq += s[j] * (dp[j] - dsum) * at(1, b, j, h, d) * p.scale;
                    }
                    const size_t k = (((size_t) b * c.Tq + i) * H + h) * D + d;
                    worst[0] = fmax(worst[0], fabs(out - o[k]) / (1 + fabs(out)));
                    worst[1] = fmax(worst[1], fabs(dq - gr[k]) / (1 + fabs(dq)));
                }
                for (int j = 0; j < keys; j++) for (int d = 0; d < D; d++) {
                    dk[(size_t) j * D + d] += s[j] * (dp[j] - dsum) * at(0, b, i, h, d) * p.scale;
                    dv[(size_t) j * D + d] += s[j] * bf16(gi[d]);
                }
            }
            for (int j = 0; j < c.Tk; j++) for (int d = 0; d < D; d++) {
                const size_t k = (((size_t) b * c.Tk + j) * H + h) * D + d;
                worst[2] = fmax(worst[2], fabs(dk[(size_t) j * D + d] - gr[nq + k]) / (1 + fabs(dk[(size_t) j * D + d])));
                worst[3] = fmax(worst[3], fabs(dv[(size_t) j * D + d] - gr[nq + nk + k]) / (1 + fabs(dv[(size_t) j * D + d])));
            }
        }
    }
    bool ok = true;
    if (timeit) {
        cudaEvent_t e0, e1, e2;
        cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2);
        const int reps = 20;
        cudaEventRecord(e0);
        for (int r = 0; r < reps; r++) gglua_fa_forward(D, p, 0);
        cudaEventRecord(e1);
        for (int r = 0; r < reps; r++) gglua_fa_backward(D, p, 0);
        cudaEventRecord(e2);
        CHECK(cudaEventSynchronize(e2));
        float f, bk;
        cudaEventElapsedTime(&f, e0, e1);
        cudaEventElapsedTime(&bk, e1, e2);
        const double flop = 4.0 * B * H * (double) c.Tq * c.Tk * D * (c.causal ? 0.5 : 1.0);
        printf("flash B=%d H=%d T=%d/%d D=%d causal=%d: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f TFLOP/s of 2.5x)\n",
               B, H, c.Tq, c.Tk, D, c.causal, f / reps, flop / (f / reps * 1e9), bk / reps, 2.5 * flop / (bk / reps * 1e9));
    } else {
        ok = worst[0] < 2e-2 && worst[1] < 2e-2 && worst[2] < 2e-2 && worst[3] < 2e-2;
        printf("%s B=%d H=%d Tq=%d Tk=%d D=%d causal=%d: worst relative error out %.2e dq %.2e dk %.2e dv %.2e\n", ok ? "ok  " : "FAIL",
               B, H, c.Tq, c.Tk, D, c.causal, worst[0], worst[1], worst[2], worst[3]);
    }
    cudaFree(dx); cudaFree(dg); cudaFree(fwd); cudaFree(grads); cudaFree(delta);
    return ok;
}

// With an argument ("check") only the checks run: under compute-sanitizer.
int main(int argc, char ** argv) {
    gglua_fa_raise_limits();
    const Case cases[] = {{2, 3, 70, 70, 64, true}, {1, 2, 33, 130, 32, false}, {2, 1, 129, 65, 16, true},
                          {1, 2, 100, 100, 128, true}, {1, 1, 64, 64, 64, false}, {2, 2, 200, 77, 64, false}};
    bool ok = true;
    for (const Case & c : cases) ok = run(c, false) && ok;
    if (argc > 1) {
        return ok ? 0 : 1;
    }
    run({8, 12, 1024, 1024, 64, true}, true);
    run({64, 6, 256, 256, 64, true}, true);
    run({16, 6, 1024, 1024, 64, true}, true);
    run({32, 12, 1024, 1024, 64, true}, true);
    return ok ? 0 : 1;
}
