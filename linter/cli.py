def main():
    print("tilefit")
