from corral.cli.entry import main

main()
