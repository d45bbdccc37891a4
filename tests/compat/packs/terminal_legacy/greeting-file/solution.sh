#!/bin/bash
echo "Hello, $(cat name.txt)!" > hello.txt
