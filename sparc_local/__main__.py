from sparc_local.entry import console

console()
