"""gputrace.kernel_names: demangling, the short display form, one-line cells."""

from gputrace.activity import short_kernel_name
from gputrace.kernel_names import ELLIPSIS, demangle, display_name, fit

TANH = ("void at::native::vectorized_elementwise_kernel<4, at::native::tanh_kernel_cuda(at::TensorIteratorBase&)::"
        "{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, std::array<char*, 2ul>)")


def test_demangles_itanium_symbols_and_leaves_others():
    assert demangle("_Z3nttILi256EEvP2Fri") == "void ntt<256>(Fr*, int)"
    assert demangle("ncclDevKernel_AllReduce_Sum_f32_RING_LL") == "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
    assert demangle("_Znot a symbol") == "_Znot a symbol"  # refused by the runtime: unchanged


def test_display_name_elides_templates_and_arguments():
    assert display_name("_Z3nttILi256EEvP2Fri") == "ntt<…>"
    assert display_name(TANH) == "at::native::vectorized_elementwise_kernel<…>"
    cutlass = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(Params)"
    assert display_name(cutlass) == "cutlass::Kernel2<…>"
    anon = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<M<1>, float>(M<1>, float)"
    assert display_name(anon) == "at::native::(anonymous namespace)::multi_tensor_apply_kernel<…>"
    # Nsight's spelling of the same kernel gives the same display name.
    nsight = anon.replace("(anonymous namespace)", "<unnamed>").replace("<1>", "<(int)1>")
    assert display_name(nsight) == display_name(anon)
    assert display_name("sm80_xmma_gemm_f32f32_tn_n") == "sm80_xmma_gemm_f32f32_tn_n"
    assert display_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == \
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def test_short_kernel_name_keeps_anonymous_namespaces_out_of_the_argument_list():
    assert short_kernel_name("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<A>(A)") == \
        "multi_tensor_apply_kernel"


def test_fit_is_one_line_and_cut_with_an_ellipsis():
    assert fit("a\nb", 10) == "a b"
    assert fit(TANH, 20) == TANH[:19] + ELLIPSIS and len(fit(TANH, 20)) == 20
    assert fit("abc", 0) == ""
