// Placeholder until the CLI lands (issue: Foundation).
int main() { return 0; }
