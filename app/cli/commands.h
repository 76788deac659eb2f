#pragma once
// One function per tokenscope-cli command. Each returns the process exit status and throws
// tokenscope::Error for anything wrong with the input; main() turns that into one line on
// stderr and status 1.
namespace tokenscope::cli {

int run_inspect(int argc, char** argv, int first);
int run_tokenize(int argc, char** argv, int first);
int run_devices(int argc, char** argv, int first);
int run_run(int argc, char** argv, int first);
int run_chat(int argc, char** argv, int first);
int run_bench(int argc, char** argv, int first);
int run_bench_tokenizer(int argc, char** argv, int first);
int run_ppl(int argc, char** argv, int first);
int run_render_template(int argc, char** argv, int first);
int run_make_model(int argc, char** argv, int first);
int run_selftest(int argc, char** argv, int first);
int run_kernel_lab(int argc, char** argv, int first);
int run_imatrix(int argc, char** argv, int first);
int run_quantize(int argc, char** argv, int first);
int run_quant_eval(int argc, char** argv, int first);
// Only in builds with the server libraries (TOKENSCOPE_HAVE_SERVER).
int run_serve(int argc, char** argv, int first);
int run_attention(int argc, char** argv, int first);

}  // namespace tokenscope::cli
