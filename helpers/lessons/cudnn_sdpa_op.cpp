// Notebook 08, deep dive C: the capstone's attention op written against the cuDNN frontend's C++ API and
// registered with TORCH_LIBRARY, so that no Python runs between torch's dispatcher and cudnnBackendExecute.
// Built by helpers/lessons/cpp_op.py with torch.utils.cpp_extension; the fakes and the autograd formula are
// registered from Python, the same as for the Python ops.
//
//   course_cpp::sdpa(q, k, v, causal, scale) -> (o, stats)
//   course_cpp::sdpa_backward(q, k, v, o, do, stats, causal, scale) -> (dq, dk, dv)
//
// q, k, v, o, do: [B, H, S, D] bf16 or fp16 in any gap-free layout (BHSD or BSHD storage); stats [B, H, S, 1]
// fp32. Each distinct (kind, causal, scale, dtype, device, shapes, strides) builds its graph once.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <dlfcn.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

// Built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: the frontend calls cuDNN through this handle, which is the
// libcudnn torch has already loaded (RTLD_NOLOAD), so the op and torch can never run two different cuDNNs.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace {

struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;
    at::Tensor workspace;   // one buffer per plan: enough for one stream at a time
    int n_tensors;          // the variant pack: UIDs 1..n_tensors, in that order
};

std::mutex plans_mutex;
std::map<std::vector<int64_t>, Plan> plans;

struct BoundHandle {
    cudnnHandle_t handle = nullptr;
    cudaStream_t stream  = nullptr;
};
std::map<int, BoundHandle> handles;   // one per device, guarded by plans_mutex

void check(fe::error_t status, char const *what) {
    TORCH_CHECK(status.is_good(), "cuDNN frontend (C++): ", what, " failed: ", status.get_message());
}

void load_cudnn() {
    if (fe::cudnn_dlhandle != nullptr) return;
    fe::cudnn_dlhandle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);   // the one torch loaded
    TORCH_CHECK(fe::cudnn_dlhandle != nullptr,
                "course_cpp: libcudnn.so.9 is not loaded in this process; run a cuDNN op in torch first "
                "(torch loads it on first use): ", dlerror());
}

// The device's handle on torch's current stream; cudnnSetStream only when the stream changed.
cudnnHandle_t handle_on_current_stream(int device) {
    BoundHandle &bound = handles[device];
    if (bound.handle == nullptr) {
        TORCH_CHECK(fe::detail::create_handle(&bound.handle) == CUDNN_STATUS_SUCCESS, "cudnnCreate failed");
    }
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    if (stream != bound.stream) {
        TORCH_CHECK(fe::detail::set_stream(bound.handle, stream) == CUDNN_STATUS_SUCCESS, "cudnnSetStream failed");
        bound.stream = stream;
    }
    return bound.handle;
}

// The layout rule of the Python op: BHSD or BSHD storage without gaps as it is, anything else copied.
at::Tensor cudnn_layout(at::Tensor const &t) {
    return (t.is_contiguous() || t.transpose(1, 2).is_contiguous()) ? t : t.contiguous();
}

std::shared_ptr<fe::graph::Tensor_attributes> graph_tensor(fe::graph::Graph &g, at::Tensor const &t, int64_t uid,
                                                           char const *name) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim(t.sizes().vec())
                        .set_stride(t.strides().vec())
                        .set_data_type(t.scalar_type() == at::kFloat ? fe::DataType_t::FLOAT
                                       : t.scalar_type() == at::kHalf ? fe::DataType_t::HALF
                                                                      : fe::DataType_t::BFLOAT16));
}

void set_output(std::shared_ptr<fe::graph::Tensor_attributes> const &out, at::Tensor const &t, int64_t uid) {
    out->set_output(true).set_uid(uid).set_dim(t.sizes().vec()).set_stride(t.strides().vec());
    if (t.scalar_type() == at::kFloat) out->set_data_type(fe::DataType_t::FLOAT);
}

std::vector<int64_t> plan_key(int64_t kind, bool causal, double scale, std::vector<at::Tensor> const &tensors) {
    int64_t scale_bits;
    std::memcpy(&scale_bits, &scale, sizeof scale_bits);
    std::vector<int64_t> key{kind, causal, scale_bits, static_cast<int64_t>(tensors[0].scalar_type()),
                             tensors[0].get_device()};
    for (auto const &t : tensors) {
        key.insert(key.end(), t.sizes().begin(), t.sizes().end());
        key.insert(key.end(), t.strides().begin(), t.strides().end());
    }
    return key;
}

// Build the graph make(g) describes, with the heuristics' first plan that builds, and its workspace.
template <typename Make>
Plan build(cudnnHandle_t handle, at::Tensor const &like, int n_tensors, Make make) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(like.scalar_type() == at::kHalf ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    make(*g);
    check(g->validate(), "validate");
    check(g->build_operation_graph(handle), "build_operation_graph");
    check(g->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans");
    check(g->check_support(handle), "check_support");
    check(g->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
    int64_t workspace_bytes = 0;
    check(g->get_workspace_size(workspace_bytes), "get_workspace_size");
    return Plan{g, at::empty({std::max<int64_t>(workspace_bytes, 1)}, like.options().dtype(at::kByte)), n_tensors};
}

fe::graph::SDPA_attributes forward_attributes(bool causal, double scale) {
    auto attributes = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
        static_cast<float>(scale));
    if (causal) attributes.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    return attributes;
}

fe::graph::SDPA_backward_attributes backward_attributes(bool causal, double scale) {
    auto attributes =
        fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(static_cast<float>(scale));
    if (causal) attributes.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    return attributes;
}

// Run the plan: the pointers in UID order (1..n) are the whole variant pack.
void execute(Plan &plan, cudnnHandle_t handle, std::vector<at::Tensor> const &tensors) {
    void *pointers[16];
    for (int i = 0; i < plan.n_tensors; ++i) pointers[i] = tensors[i].data_ptr();
    check(plan.graph->execute(handle, pointers, plan.n_tensors, plan.workspace.data_ptr()), "execute");
}

std::tuple<at::Tensor, at::Tensor> sdpa_forward(at::Tensor const &q_in, at::Tensor const &k_in,
                                                at::Tensor const &v_in, bool causal, double scale) {
    at::Tensor q = cudnn_layout(q_in), k = cudnn_layout(k_in), v = cudnn_layout(v_in);
    c10::cuda::CUDAGuard guard(q.device());
    at::Tensor o     = at::empty_like(q);   // same strides as q: empty_like keeps a gap-free layout
    at::Tensor stats = at::empty({q.size(0), q.size(1), q.size(2), 1}, q.options().dtype(at::kFloat));
    std::vector<at::Tensor> tensors{q, k, v, o, stats};   // UIDs 1..5
    std::lock_guard<std::mutex> lock(plans_mutex);
    load_cudnn();
    cudnnHandle_t handle = handle_on_current_stream(q.get_device());
    auto key             = plan_key(0, causal, scale, {q, k, v});
    auto found           = plans.find(key);
    if (found == plans.end()) {
        found = plans.emplace(key, build(handle, q, 5, [&](fe::graph::Graph &g) {
                                  auto out = g.sdpa(graph_tensor(g, q, 1, "q"), graph_tensor(g, k, 2, "k"),
                                                    graph_tensor(g, v, 3, "v"), forward_attributes(causal, scale));
                                  set_output(out[0], o, 4);
                                  set_output(out[1], stats, 5);
                              }))
                    .first;
    }
    execute(found->second, handle, tensors);
    return {o, stats};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sdpa_backward(at::Tensor const &q_in, at::Tensor const &k_in,
                                                             at::Tensor const &v_in, at::Tensor const &o_in,
                                                             at::Tensor const &do_in, at::Tensor const &stats_in,
                                                             bool causal, double scale) {
    at::Tensor q = cudnn_layout(q_in), k = cudnn_layout(k_in), v = cudnn_layout(v_in);
    at::Tensor o = cudnn_layout(o_in), d_o = cudnn_layout(do_in), stats = cudnn_layout(stats_in);
    c10::cuda::CUDAGuard guard(q.device());
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
    std::vector<at::Tensor> tensors{q, k, v, o, d_o, stats, dq, dk, dv};   // UIDs 1..9
    std::lock_guard<std::mutex> lock(plans_mutex);
    load_cudnn();
    cudnnHandle_t handle = handle_on_current_stream(q.get_device());
    auto key             = plan_key(1, causal, scale, {q, k, v, o, d_o, stats});
    auto found           = plans.find(key);
    if (found == plans.end()) {
        found = plans.emplace(key, build(handle, q, 9, [&](fe::graph::Graph &g) {
                                  auto out = g.sdpa_backward(
                                      graph_tensor(g, q, 1, "q"), graph_tensor(g, k, 2, "k"),
                                      graph_tensor(g, v, 3, "v"), graph_tensor(g, o, 4, "o"),
                                      graph_tensor(g, d_o, 5, "dO"), graph_tensor(g, stats, 6, "stats"),
                                      backward_attributes(causal, scale));
                                  set_output(out[0], dq, 7);
                                  set_output(out[1], dk, 8);
                                  set_output(out[2], dv, 9);
                              }))
                    .first;
    }
    execute(found->second, handle, tensors);
    return {dq, dk, dv};
}


}  // namespace

TORCH_LIBRARY(course_cpp, m) {
    m.def("sdpa(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor, Tensor)");
    m.def("sdpa_backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor do, Tensor stats, bool causal, "
          "float scale) -> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(course_cpp, CUDA, m) {
    m.impl("sdpa", &sdpa_forward);
    m.impl("sdpa_backward", &sdpa_backward);
}
