print("hello from the release")
