// cca-trace-replay's executable: the replay itself is in cca_replay.cpp (a library, so that a
// Python process with another allocator installed into PyTorch can run it too).
extern "C" int cca_replay_main(int argc, char** argv);

int main(int argc, char** argv) { return cca_replay_main(argc, argv); }
