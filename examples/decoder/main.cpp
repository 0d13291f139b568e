// Greedy generation with a small, randomly initialised decoder stack, twice: the classic
// tutorials' way (every step runs attention over the whole prefix again, attngen_mha_forward
// with a causal mask) and with a KV cache (each step appends one token per layer and attends
// to the cache, attngen_mha_forward_cached). Both must produce the same tokens; the program
// prints tokens per second for each and exits non-zero if the tokens differ.
//
//   build/examples/attngen_decoder [tokens]
#include <attngen/attngen.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

// Llama-like attention (grouped KV heads, rotary positions, no bias) at a toy size.
constexpr int kVocab = 97, kModel = 64, kHeads = 8, kKvHeads = 2, kHidden = 128, kLayers = 3;

std::vector<float> random_matrix(std::mt19937 &rng, int rows, int cols) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const float scale = 1.0f / std::sqrt(float(cols));
    std::vector<float> m(size_t(rows) * cols);
    for (float &x : m) x = dist(rng) * scale;
    return m;
}

// y [out] = W [out, in] x [in]
void matvec(const std::vector<float> &w, const float *x, int out, int in, float *y) {
    for (int o = 0; o < out; ++o) {
        float acc = 0.0f;
        for (int i = 0; i < in; ++i) acc += w[size_t(o) * in + i] * x[i];
        y[o] = acc;
    }
}

// x / rms(x): keeps the residual stream at unit scale through the layers.
void rms_normalize(float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) sum += double(x[i]) * x[i];
    const float inv = float(1.0 / std::sqrt(sum / n + 1e-6));
    for (int i = 0; i < n; ++i) x[i] *= inv;
}

struct Layer {
    attngen::MultiHeadAttention attention;
    std::vector<float> w1, w2;  // the feed-forward block, [hidden, model] and [model, hidden]
};

struct Model {
    std::vector<float> embedding;  // [vocab, model]
    std::vector<float> head;       // [vocab, model]: logits of the next token
    std::vector<Layer> layers;
};

Model make_model(uint32_t seed) {
    std::mt19937 rng(seed);
    Model m;
    m.embedding = random_matrix(rng, kVocab, kModel);
    for (float &x : m.embedding) x *= std::sqrt(float(kModel));  // unit-scale embeddings
    m.head = random_matrix(rng, kVocab, kModel);
    const int hd = kModel / kHeads;
    for (int l = 0; l < kLayers; ++l) {
        attngen::MhaConfig c;
        c.d_model = kModel;
        c.num_heads = kHeads;
        c.num_kv_heads = kKvHeads;
        c.use_bias = false;
        c.rope = ATTNGEN_ROPE_HALF;
        Layer layer{attngen::MultiHeadAttention(c), random_matrix(rng, kHidden, kModel),
                    random_matrix(rng, kModel, kHidden)};
        const std::vector<float> wq = random_matrix(rng, kHeads * hd, kModel);
        const std::vector<float> wk = random_matrix(rng, kKvHeads * hd, kModel);
        const std::vector<float> wv = random_matrix(rng, kKvHeads * hd, kModel);
        const std::vector<float> wo = random_matrix(rng, kModel, kHeads * hd);
        layer.attention.set_weights(
            {wq.data(), {kHeads * hd, kModel}}, {wk.data(), {kKvHeads * hd, kModel}},
            {wv.data(), {kKvHeads * hd, kModel}}, {wo.data(), {kModel, kHeads * hd}});
        m.layers.push_back(std::move(layer));
    }
    return m;
}

// x += W2 relu(W1 x), then normalized.
void feed_forward(const Layer &layer, float *x) {
    std::vector<float> h(kHidden), y(kModel);
    matvec(layer.w1, x, kHidden, kModel, h.data());
    for (float &v : h) v = std::max(v, 0.0f);
    matvec(layer.w2, h.data(), kModel, kHidden, y.data());
    for (int i = 0; i < kModel; ++i) x[i] += y[i];
    rms_normalize(x, kModel);
}

int argmax_token(const Model &m, const float *x) {
    std::vector<float> logits(kVocab);
    matvec(m.head, x, kVocab, kModel, logits.data());
    return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Without a cache: every step runs each layer over the whole prefix and keeps the last row.
std::vector<int> generate_without_cache(const Model &m, int first, int count) {
    std::vector<int> tokens = {first};
    for (int step = 0; step < count; ++step) {
        const int len = int(tokens.size());
        std::vector<float> x(size_t(len) * kModel), attn(x.size());
        for (int t = 0; t < len; ++t)
            std::copy_n(&m.embedding[size_t(tokens[t]) * kModel], kModel, &x[size_t(t) * kModel]);
        for (const Layer &layer : m.layers) {
            attngen::Mask causal;
            causal.causal = ATTNGEN_CAUSAL_TOP_LEFT;
            layer.attention.forward({x.data(), {1, len, kModel}}, {x.data(), {1, len, kModel}},
                                    {x.data(), {1, len, kModel}}, {attn.data(), {1, len, kModel}},
                                    causal);
            for (int t = 0; t < len; ++t) {
                float *row = &x[size_t(t) * kModel];
                for (int i = 0; i < kModel; ++i) row[i] += attn[size_t(t) * kModel + i];
                rms_normalize(row, kModel);
                feed_forward(layer, row);
            }
        }
        tokens.push_back(argmax_token(m, &x[size_t(len - 1) * kModel]));
    }
    return tokens;
}

// With a cache per layer: every step appends the new token's row and attends to the cache.
std::vector<int> generate_with_cache(const Model &m, int first, int count) {
    std::vector<attngen::KvCache> caches;
    for (const Layer &layer : m.layers) caches.emplace_back(layer.attention, 1, count + 1);
    std::vector<int> tokens = {first};
    std::vector<float> x(kModel), attn(kModel);
    for (int step = 0; step < count; ++step) {
        std::copy_n(&m.embedding[size_t(tokens.back()) * kModel], kModel, x.data());
        for (size_t l = 0; l < m.layers.size(); ++l) {
            caches[l].append({x.data(), {1, 1, kModel}}, {x.data(), {1, 1, kModel}});
            caches[l].forward({x.data(), {1, 1, kModel}}, {attn.data(), {1, 1, kModel}});
            for (int i = 0; i < kModel; ++i) x[i] += attn[i];
            rms_normalize(x.data(), kModel);
            feed_forward(m.layers[l], x.data());
        }
        tokens.push_back(argmax_token(m, x.data()));
    }
    return tokens;
}

}  // namespace

int main(int argc, char **argv) {
    const int count = argc > 1 ? std::atoi(argv[1]) : 48;
    if (count < 1) {
        std::fprintf(stderr, "usage: %s [tokens >= 1]\n", argv[0]);
        return 2;
    }
    try {
        const Model model = make_model(2024);
        using Clock = std::chrono::steady_clock;
        const auto t0 = Clock::now();
        const std::vector<int> plain = generate_without_cache(model, 1, count);
        const auto t1 = Clock::now();
        const std::vector<int> cached = generate_with_cache(model, 1, count);
        const auto t2 = Clock::now();
        const double plain_s = std::chrono::duration<double>(t1 - t0).count();
        const double cached_s = std::chrono::duration<double>(t2 - t1).count();
        std::printf("tokens:");
        for (int t : cached) std::printf(" %d", t);
        std::printf("\nwithout a cache: %8.1f tokens/s  (attention over the whole prefix)\n",
                    count / plain_s);
        std::printf("with a KV cache: %8.1f tokens/s  (%d layers, %d heads over %d KV heads)\n",
                    count / cached_s, kLayers, kHeads, kKvHeads);
        if (plain != cached) {
            std::printf("MISMATCH: the two runs generated different tokens\n");
            return 1;
        }
        std::printf("both runs generated the same %d tokens\n", count);
        return 0;
    } catch (const attngen::Error &e) {
        std::fprintf(stderr, "attngen error: %s\n", e.what());
        return 1;
    }
}
