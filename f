x
x
