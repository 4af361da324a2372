// Placeholder until the demo lands (issue: CPU reference engine).
int main() { return 0; }
