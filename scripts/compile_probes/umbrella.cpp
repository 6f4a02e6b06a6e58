// compile_times.sh probe: the umbrella header alone (what every TU that includes it pays).
#include <vbucket/vbucket.hpp>

int main() { return 0; }
