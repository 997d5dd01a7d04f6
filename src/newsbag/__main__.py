from newsbag.cli import main

main()
