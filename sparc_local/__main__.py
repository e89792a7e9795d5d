from sparc_local.cli.entry import console

console()
