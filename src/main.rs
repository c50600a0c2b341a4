fn main() -> std::process::ExitCode {
    convo::cli::main()
}
