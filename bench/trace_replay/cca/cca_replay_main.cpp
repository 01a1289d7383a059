// cca-trace-replay's executable: the replay itself is cca_replay_main in cca_replay.cpp, which
// bench/torch_alloc/trace_replay.py also loads into a Python process as a library.
extern "C" int cca_replay_main(int argc, char** argv);

int main(int argc, char** argv) { return cca_replay_main(argc, argv); }
